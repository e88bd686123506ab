"""The command line: one module per `tfbench SUBCOMMAND`.
"""
