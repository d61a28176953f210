"""transforms/core"""
