# Sourced first by every transcript that Tools/transcripts makes of a session of the README, docs/ or
# the DocC articles: the tools on PATH, the repository's Tools/ where a session names them, and the
# helpers the generated lines call to run what a reader runs in the background or in another terminal.
export PATH="$GROUPDEFAULTS_BIN_DIR:$PATH"
export HOME="$PWD"
# Where Tools/postgres makes its clusters: a folder the postgres user can reach (prysk's is private).
export TMPDIR=/tmp
ln -s "$REPOSITORY/Tools" Tools
# Jobs started by the session: "PID LOG" a line, in order.
: > .transcript-jobs
: > .transcript-terminals
# Everything the session prints is also kept, for transcript_recall.
: > .transcript-output

# transcript_shown: prints what the last command printed (the runner sends it to .transcript-last),
# and keeps it for transcript_recall.
transcript_shown() {
  cat .transcript-last
  # Output that does not end a line (curl's) is followed by the next prompt on a line of its own.
  [ -z "$(tail -c 1 .transcript-last)" ] || echo
  cat .transcript-last >> .transcript-output
}

# transcript_recall REGEX: the last text matching REGEX that the session printed (a token's id, a
# pairing code: what a reader copies into the next command).
transcript_recall() {
  grep -oE "$1" .transcript-output | tail -n 1
}

# transcript_background N 'COMMAND': starts the command (a simple command, with its redirections) in
# the background, what it prints to a log, and prints its first N lines once it has printed them
# (tail -f follows the log through inotify; 60 s at most).
transcript_background() {
  local count=$1 log
  log=$(mktemp "$PWD/.transcript-job.XXXXXX")
  # exec: the job is the command itself, which transcript_finish stops.
  ( eval "exec $2" ) > "$log" 2>&1 &
  echo "$! $log $count" >> .transcript-jobs
  [ "$count" -gt 0 ] || return 0
  timeout 60 sed -n "1,${count}p;${count}q" < <(tail -n +1 -f --pid=$! "$log") | tee -a .transcript-output
}

# transcript_wait: waits for the last background job to end, and prints what it printed after the
# lines already shown.
transcript_wait() {
  local pid log count
  read -r pid log count < <(tail -n 1 .transcript-jobs)
  timeout 60 tail -n +$((count + 1)) -f --pid="$pid" "$log"
}

# transcript_another_terminal N 'COMMAND': starts the command in the background, as a reader would in another
# terminal, and prints its first N lines (0 or 1) once it has printed them; what it prints next is
# shown at the end (transcript_output_of_next).
transcript_another_terminal() {
  transcript_background "$@"
  tail -n 1 .transcript-jobs >> .transcript-terminals
}

# transcript_output_of_next N: the next N lines of the next job started in another terminal, awaited
# (60 s at most).
transcript_output_of_next() {
  local count=$1 pid log shown
  read -r pid log shown < <(head -n 1 .transcript-terminals)
  sed -i 1d .transcript-terminals
  [ "$count" -gt 0 ] || return 0
  timeout 60 sed -n "1,${count}p;${count}q" < <(tail -n +$((shown + 1)) -f --pid="$pid" "$log")
}

# transcript_finish: stops every job (SIGTERM, as a service manager does), and every PostgreSQL a
# session started with Tools/postgres.
transcript_finish() {
  local pid log count
  while read -r pid log count; do
    kill "$pid" 2>/dev/null || true
  done < .transcript-jobs
  wait
  [ -z "${URL:-}" ] || Tools/postgres stop "$URL" 2>/dev/null || true
}
