# compare.gp -- compare.png from compare.csv: busbw vs size, one panel per rank count, one line per variant.
# Called by compare.sh with csv, png and ranks ("2 4") set.
set datafile separator ","
set datafile missing "n/a"
set terminal pngcairo size 1400,560 font ",10" noenhanced  # names contain "_"
set output png
set logscale x 2
# Labels by hand: gnuplot's %b rounds 2^20 to "1023ki".
set xtics ()
do for [k = 10:34:2] {
  lbl = k < 20 ? sprintf("%dK", 2**(k-10)) : k < 30 ? sprintf("%dM", 2**(k-20)) : sprintf("%dG", 2**(k-30))
  set xtics add (lbl 2**k)
}
set xlabel "size (bytes)"
set ylabel "busbw (GB/s)"
set key top left font ",9"
set grid
n = words(ranks)
set multiplot layout 1, n
do for [i = 1:n] {
  p = word(ranks, i) + 0
  set title sprintf("float32 sum all-reduce, %d ranks", p)
  # Columns 3..10 of compare.csv are the variants; rows of other rank counts are dropped (NaN).
  plot for [c = 3:10] csv using (column(1) == p ? column(2) : NaN):c with linespoints \
       lw 2 pt 7 ps 0.6 title columnheader(c)
}
unset multiplot
