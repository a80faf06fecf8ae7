"""Tuning the I/O stack of a program without changing it: settings files
applied at run time (``settings``) and the tools that choose them."""
