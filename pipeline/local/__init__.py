"""pipeline/local"""
