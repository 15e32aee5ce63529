"""XML-Q (eBay §3.3): the CNN-RNN query classifier, its losses, training and export."""
