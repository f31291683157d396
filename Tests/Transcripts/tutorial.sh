# The tutorial's server: started with its defaults, as the README's section on the server shows.
transcript_background 1 'groupdefaults-server serve 2> server.log' > /dev/null
