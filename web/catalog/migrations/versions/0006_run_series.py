"""Runs belong to series (a name and a label given at upload, their recording time), and
series carry the tags that select them and their regression limits.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("series", sa.String(100), nullable=True))
        batch.add_column(sa.Column("label", sa.String(200), nullable=True))
        batch.add_column(sa.Column("recorded_ns", sa.BigInteger(), nullable=True))
        batch.create_index("ix_runs_series", ["series"])
    op.create_table(
        "series",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("tags", sa.String(500), nullable=True),
        sa.Column("limits", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("series")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_series")
        batch.drop_column("recorded_ns")
        batch.drop_column("label")
        batch.drop_column("series")
