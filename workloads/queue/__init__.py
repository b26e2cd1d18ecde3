"""The queue workload"""
