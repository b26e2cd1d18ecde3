"""The connect workload"""
