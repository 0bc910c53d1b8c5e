"""Stage entry points, the stage catalogue (both engines' DAGs) and the machinery stages share."""
