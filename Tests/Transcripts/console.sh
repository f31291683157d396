# The operator's password, on the first line of a file only its owner reads.
(umask 077; echo 'correct horse battery staple' > ops.password)
