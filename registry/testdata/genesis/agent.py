"""Drive the unmodified Genesis-Mesh reference node library against a
Network Authority (capmesh's HTTP binding, in TestGenesisReferenceInterop).

usage: agent.py NA_URL NODE_HOME ACTION [CAPABILITY...]

NODE_HOME is what `genesis-mesh join --config NODE_HOME/config.toml` wrote.
Every action prints one JSON line. This file is capmesh's; it only calls
the reference's public functions (genesis_mesh.node.discovery_client,
genesis_mesh.node.node.MeshNode) and models, which must be importable.
"""
import base64
import json
import sys

import requests

from genesis_mesh.crypto import KeyPair, load_private_key, public_key_from_b64, verify_model_signature
from genesis_mesh.models import CertificateRevocationList, GenesisBlock, JoinCertificate
from genesis_mesh.node.discovery_client import build_signed_descriptor, deregister, discover, register_descriptor
from genesis_mesh.node.node import MeshNode

na, home, action, *caps = sys.argv[1:]
key = load_private_key(f"{home}/keys/node.key")
pub = base64.b64encode(bytes(key.verify_key)).decode()
genesis = GenesisBlock(**json.load(open(f"{home}/genesis.signed.json")))


def node():
    n = MeshNode(genesis_block=genesis, node_keypair=KeyPair(private_key=key, public_key=key.verify_key))
    n.join_certificate = JoinCertificate.model_validate_json(open(f"{home}/node.cert.json").read())
    return n


def out(**kw):
    print(json.dumps(kw, sort_keys=True))


if action == "register":
    d = build_signed_descriptor(
        agent_id="gm-agent", node_public_key=pub, network_name=genesis.network_name, capabilities=caps,
        host="127.0.0.1", port=9443, scheme="wss", private_key=key, ttl_seconds=600,
        metadata={"model": "tiny", "ratio": 0.5, "note": "h\u00e9llo \U0001F600"},
    )
    try:
        out(key=pub, answer=register_descriptor(na, d))
    except requests.HTTPError as e:
        out(key=pub, status=e.response.status_code, error=e.response.json().get("error", {}).get("code"))
elif action == "discover":
    found = discover(na, caps[0] if caps else None)
    out(agents=[{"agent_id": d.agent_id, "key": d.node_public_key, "capabilities": d.capabilities,
                 "endpoint": d.endpoint.to_uri(), "metadata": d.metadata} for d in found])
elif action == "deregister":
    out(deregistered=deregister(na_endpoint=na, node_public_key=pub, private_key=key))
elif action == "heartbeat":
    out(acknowledged=node().send_heartbeat(na))
elif action == "renew":
    n = node()
    old = n.join_certificate.cert_id
    ok = n.renew_certificate(na, validity_hours=12)
    out(renewed=ok, old=old, new=n.join_certificate.cert_id)
elif action == "crl":
    crl = CertificateRevocationList(**requests.get(f"{na}/crl", timeout=10).json())
    valid = verify_model_signature(crl, crl.signatures[0], public_key_from_b64(genesis.network_authority.public_key))
    out(sequence=crl.sequence, signature_valid=valid, revoked=[[r.certificate_id, r.reason] for r in crl.revoked_certificates])
else:
    sys.exit(f"unknown action {action}")
