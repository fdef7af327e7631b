"""The pure core: declaring and compiling machines, values, errors, conditions,
the event choice, the status step and the dry-run plan. No I/O, and no import
of any other part of lifecycle."""
