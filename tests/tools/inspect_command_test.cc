// placeholder: filled in by the foundation issue's work in progress
