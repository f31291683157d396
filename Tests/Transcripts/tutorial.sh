# The tutorial's server: started with its defaults, as docs/guide/server.md shows.
transcript_background 1 'groupdefaults-server serve 2> server.log' > /dev/null
