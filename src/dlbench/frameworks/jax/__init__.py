"""JAX: `about` declares it (light: no jax), `backend` is what every scenario needs, and the
modules named after scenarios hold that scenario's operations."""
