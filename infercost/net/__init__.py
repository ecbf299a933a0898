"""Where the service may connect (the outbound policy), and the one TLS context every
outbound client shares."""
