"""qcat measure: what training and evaluation both measure with (PR@k, GS scores, head/torso/tail)."""
