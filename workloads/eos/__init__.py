"""The eos workload"""
