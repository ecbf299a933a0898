# syntax=docker/dockerfile:1
# One image for every infercost service in docker-compose.yml (api, worker, migrate):
# the command picks the part, e.g. `docker run IMAGE worker`.

FROM python:3.12-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
# .dockerignore keeps the local virtualenv, caches and data dirs out of the context.
COPY . .
RUN /opt/venv/bin/pip install .

FROM python:3.12-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INFERCOST_DATA_DIR=/var/lib/infercost
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/infercost infercost \
    && install -d -o infercost -g infercost /var/lib/infercost
COPY --from=build /opt/venv /opt/venv
# `infercost migrate` finds alembic.ini and migrations/ in its working directory.
WORKDIR /app
COPY alembic.ini ./
COPY migrations ./migrations
# The documentation pages the API serves at /docs/<page>.md (found in the working directory).
COPY docs ./docs
USER infercost
EXPOSE 8000
ENTRYPOINT ["infercost"]
CMD ["api", "--host", "0.0.0.0"]
