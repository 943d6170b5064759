"""Pure render functions: a snapshot (plus labels and language) in, a figure or text out."""
