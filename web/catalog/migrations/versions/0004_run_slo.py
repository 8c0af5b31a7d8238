"""Runs keep the serving objectives they are analyzed against (``--slo`` on the web).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("slo", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("slo")
