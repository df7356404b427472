# bench/plots/w5.gp: W5, TPS and WAL per job vs jobs already in the table.
# gnuplot -e "dat='...'; out='...png'" w5.gp
set terminal pngcairo size 900,450 font ",10" noenhanced
set output out
set multiplot layout 1,2 title "W5: submit of new keys vs table size (4 clients, synchronous_commit=off)"
set xlabel "jobs in the table"
set format x "%.0s%c"
set grid
set key bottom left
set yrange [0:*]
set ylabel "TPS (median)"
plot dat using 1:2 with linespoints lw 2 pt 7 title "floor", \
     dat using 1:3 with linespoints lw 2 pt 7 title "idemjob"
set ylabel "WAL bytes per job"
plot dat using 1:4 with linespoints lw 2 pt 7 title "floor", \
     dat using 1:5 with linespoints lw 2 pt 7 title "idemjob"
unset multiplot
