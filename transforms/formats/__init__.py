"""transforms/formats"""
