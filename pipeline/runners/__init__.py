"""pipeline/runners"""
