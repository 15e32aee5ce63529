"""qcat measure: what training and evaluation both measure with (top-k against truth, PR@k, GS
scores, head/torso/tail segments); it imports only the rest of qcat's core."""
