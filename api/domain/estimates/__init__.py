"""Cost at your traffic: capacity at the SLO, roofline efficiency and the planner."""
