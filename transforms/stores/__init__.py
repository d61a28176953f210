"""transforms/stores"""
