"""The feedback side: `flywheel serve` (serve, serve_api, serve_recorder), `flywheel import`
(interaction_import, interaction_formats, interaction_privacy), people's review (review_queue,
review_rewards, review_stats, review_reviewers, review_page, review_page_html) and SFT/DPO data
(sft_data, run_sft_data, recorded_ids)."""
