# This section's session continues where the reader left the sync session (the README's tour, then
# docs/guide/sync.md): a server on port 8080 with its data in ./server, as that session started it.
transcript_background 1 'groupdefaults-server serve --data-dir server 2> server.log' > /dev/null
