# Written by fs-replay --sweep; draws sweep-slots-gemma.svg from sweep-slots-gemma.csv (run it in their folder).
set terminal svg size 820,500 dynamic font 'sans,12' background rgb 'white'
set output 'sweep-slots-gemma.svg'
set datafile separator ','
set key outside right
set grid
set title 'Hit rate vs slot budget (gemma)'
set xlabel 'slots, share of all experts'
set ylabel 'hit rate %'
set yrange [0:100]
plot 'sweep-slots-gemma.csv' every ::1::11 using 1:(100*$4) with linespoints title 'static', \
  'sweep-slots-gemma.csv' every ::12::22 using 1:(100*$4) with linespoints title 'lru', \
  'sweep-slots-gemma.csv' every ::23::33 using 1:(100*$4) with linespoints title 'static+recency', \
  'sweep-slots-gemma.csv' every ::34::44 using 1:(100*$4) with linespoints title 'static+predicted', \
  'sweep-slots-gemma.csv' every ::45::55 using 1:(100*$4) with linespoints title 'all'
