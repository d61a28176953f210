"""pipeline/demo"""
