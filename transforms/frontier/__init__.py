"""transforms/frontier"""
