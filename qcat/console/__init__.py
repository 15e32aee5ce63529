"""What a command shows a person: formatting tables and numbers (``output.py``), progress bars
(``progress.py``), and which extra each command needs and the message naming it when it is missing
(``extras.py``)."""
