# gw's container image, for those who build with an image registry at hand:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t gw .
# Without a registry, `make docker` builds the same image: it runs the build stage's
# `make docker-rootfs` on this machine, then builds from the lines after "FROM scratch"
# below, which it copies out of this file (dropping "--from=build /src/bin/docker/"), so the
# two cannot drift apart. Run it with:
#   docker run -d --name gw -e GW_ADMIN_KEY=$(openssl rand -hex 16) -p 9080:9080 -p 9180:9180 gw
# packaging/docker/config.yaml lists the variables it reads; README.md, "Running in a
# container", says the rest.

FROM golang:1.26-bookworm AS build
# patch applies gw's two changes to Go's runtime (tools/runtime-overlay.sh), as `make build`.
RUN apt-get update && apt-get install -y --no-install-recommends make patch ca-certificates \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make docker-rootfs VERSION="$VERSION"

FROM scratch
COPY --from=build /src/bin/docker/rootfs/ /
COPY --chown=10001:10001 --from=build /src/bin/docker/writable/ /usr/local/gw/
USER 10001:10001
WORKDIR /usr/local/gw
EXPOSE 9080 9180 9091 7085
VOLUME ["/usr/local/gw/data"]
# SIGQUIT is gw's graceful stop (nginx's too): requests in flight finish, within
# worker_shutdown_timeout (GW_SHUTDOWN_TIMEOUT, 8s), then the master exits 0.
STOPSIGNAL SIGQUIT
ENTRYPOINT ["/usr/local/bin/gwctl"]
CMD ["start", "--foreground"]
