# Written by fs-replay --sweep; draws sweep-delay-synthetic.svg from sweep-delay-synthetic.csv (run it in their folder).
set terminal svg size 820,500 dynamic font 'sans,12' background rgb 'white'
set output 'sweep-delay-synthetic.svg'
set datafile separator ','
set key outside right
set grid
set title 'Distinct misses vs landing delay (synthetic)'
set xlabel 'landing delay, windows'
set ylabel 'distinct misses vs static, %'
set xrange [0.5:6.5]
set yzeroaxis
plot 'sweep-delay-discussion.csv' using 1:2 every ::1 with linespoints lw 2 dt 2 title 'discussion: 16-slot ring', \
  'sweep-delay-synthetic.csv' every ::7::12 using 1:4 with linespoints title 'static+recency', \
  'sweep-delay-synthetic.csv' every ::13::18 using 1:4 with linespoints title 'all', \
  0 with lines lc rgb 'gray' notitle
