"""API routers by concern; each reads the loop handle from ``request.app.state.worker``."""
