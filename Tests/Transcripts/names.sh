# The names session types names with $'\u…', which bash turns into UTF-8 only under a UTF-8 locale.
export LC_ALL=C.UTF-8
