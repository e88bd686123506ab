"""Model zoo: one module per family, each registering ModelSpec entries (registry.py);
`catalog` imports them all and looks models up."""
