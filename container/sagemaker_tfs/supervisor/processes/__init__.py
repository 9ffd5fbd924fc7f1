"""Child processes: started, watched, restarted, stopped; the sockets held for them and the
scheduling policy they run under."""
