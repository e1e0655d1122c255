"""Post-training quantization and r_Qn (fedaudit.quant)."""
