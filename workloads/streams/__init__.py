"""The streams workload"""
