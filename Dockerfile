# kcoord container image: one static binary on an empty base.
#
# No base image can be pulled where kcoord is built, so the image is FROM
# scratch and the binary is built on the host first:
#
#	make image          # = make build && docker build -t kcoord:dev .
#
# bin/kcoord must be static (CGO_ENABLED=0, as `make build` does). The image
# has no shell: health checks run `/kcoord healthcheck`.
FROM scratch

COPY bin/kcoord /kcoord

# Defaults for a single node: Kafka and HTTP on every interface of the
# container, Raft and gossip on its loopback. Clients must be told an address
# they can reach: set KCOORD_ADVERTISE_KAFKA_ADDR to the published one, e.g.
#
#	docker run -p 127.0.0.1:9092:9092 -p 127.0.0.1:9644:9644 \
#	    -e KCOORD_ADVERTISE_KAFKA_ADDR=127.0.0.1:9092 kcoord:dev
#
# A cluster binds Raft and gossip on 0.0.0.0 too and advertises them by
# container name: see docker-compose.yml. Flags given after the image name
# (serve --node-id 2 ...) win over these variables.
ENV KCOORD_DATA_DIR=/data \
    KCOORD_KAFKA_ADDR=0.0.0.0:9092 \
    KCOORD_HTTP_ADDR=0.0.0.0:9644

# Kafka, Raft (all shards), gossip (TCP and UDP), HTTP (/healthz, /readyz,
# /metrics).
EXPOSE 9092/tcp 9093/tcp 7946/tcp 7946/udp 9644/tcp

# Raft logs, stable stores and snapshots. scratch has no users: the process
# runs as root, which owns the volume.
VOLUME ["/data"]

# exec form: kcoord is PID 1 and gets SIGTERM directly (a clean shutdown moves
# the node's shard leaderships away first).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=2s --timeout=3s --start-period=5s --retries=30 \
    CMD ["/kcoord", "healthcheck", "--http-addr", "127.0.0.1:9644"]

ENTRYPOINT ["/kcoord"]
CMD ["serve"]
