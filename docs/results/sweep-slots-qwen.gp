# Written by fs-replay --sweep; draws sweep-slots-qwen.svg from sweep-slots-qwen.csv (run it in their folder).
set terminal svg size 820,500 dynamic font 'sans,12' background rgb 'white'
set output 'sweep-slots-qwen.svg'
set datafile separator ','
set key outside right
set grid
set title 'Hit rate vs slot budget (qwen)'
set xlabel 'slots, share of all experts'
set ylabel 'hit rate %'
set yrange [0:100]
plot 'sweep-slots-qwen.csv' every ::1::11 using 1:(100*$4) with linespoints title 'static', \
  'sweep-slots-qwen.csv' every ::12::22 using 1:(100*$4) with linespoints title 'lru', \
  'sweep-slots-qwen.csv' every ::23::33 using 1:(100*$4) with linespoints title 'static+recency', \
  'sweep-slots-qwen.csv' every ::34::44 using 1:(100*$4) with linespoints title 'static+predicted', \
  'sweep-slots-qwen.csv' every ::45::55 using 1:(100*$4) with linespoints title 'all'
