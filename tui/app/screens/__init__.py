"""Modal screens: the rename and confirm questions, and the help screen."""
