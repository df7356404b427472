# bench/plots/growth.gp: one session from an empty table, TPS per interval.
# gnuplot -e "floor='...'; idemjob='...'; out='...png'" growth.gp
set terminal pngcairo size 800,450 font ",10" noenhanced
set output out
set title "One session (-M prepared) from empty: submit TPS per 2 s vs jobs in the table"
set xlabel "jobs in the table"
set ylabel "TPS"
set format x "%.0s%c"
set yrange [0:*]
set grid
set key bottom left
plot floor using 1:2 with lines lw 2 title "floor", idemjob using 1:2 with lines lw 2 title "idemjob"
