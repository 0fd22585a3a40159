# median(S): the median of the space-separated numbers in S (insertion sort: a handful of
# repetitions). Shared by echo_compare.sh and idle_backends.sh: awk -f median.awk -f PROGRAM.
function median(s,   a, n, i, j, t) {
  n = split(s, a, " ")
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
