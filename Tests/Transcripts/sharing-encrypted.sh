# This section's session continues where the README left its reader: a server on port 8080 with its
# data in ./server (as the sync walkthrough started it).
transcript_background 1 'groupdefaults-server serve --data-dir server 2> server.log' > /dev/null
