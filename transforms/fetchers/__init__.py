"""transforms/fetchers"""
