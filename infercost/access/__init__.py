"""Access for people: share links, browser sessions signed in with a team key, and bearer
tokens from an OpenID Connect issuer (single sign-on)."""
