"""The share checker: what a share group's (KIP-932) deliveries and acknowledgements must
satisfy."""
